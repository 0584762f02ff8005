"""Command-line entry points (`openenv ...`)."""
