"""Writers of experience into Reverb, below both the agents and the program
(as Acme keeps `acme/adders/`): batched.py writes N lockstep environments'
steps as Acme's own adders would, reward_scaling.py scales PPO's rewards on
their way in."""
