"""openenv: real coding-agent harnesses as Gym-style RL environments with token-exact capture."""

__version__ = "0.1.0"
