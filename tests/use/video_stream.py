"""What ffmpeg says of an mp4, for the video tests; light to import (no
TensorFlow, JAX or Acme), so that e2e tests read their runs' videos
without paying for those."""

import re
import subprocess

import imageio_ffmpeg


def video_stream(path: str):
  """(codec, pixel format, width, height, frames) of an mp4, from ffmpeg."""
  result = subprocess.run(
      [imageio_ffmpeg.get_ffmpeg_exe(), '-i', path, '-map', '0:v', '-f',
       'null', '-'], capture_output=True, text=True, check=False)
  stream = re.search(r'Video: (\w+).*?, (\w+)\(.*?(\d+)x(\d+)', result.stderr)
  frames = re.findall(r'frame=\s*(\d+)', result.stderr)
  return (stream.group(1), stream.group(2), int(stream.group(3)),
          int(stream.group(4)), int(frames[-1]))
