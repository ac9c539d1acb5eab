"""Subcommands of the flashsim CLI (see flashsim.cli)."""
