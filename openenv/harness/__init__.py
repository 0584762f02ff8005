"""Harness environments: unmodified coding-agent CLIs run as Gym-style RL environments.

Glossary: a **harness** is a real agent CLI (envs/<name>/spec.yaml says how to run it); an **episode**
is one task solved by one harness in one **sandbox**; the **verifier** turns the task's hidden tests
into a reward after the harness exits.
"""

from __future__ import annotations
