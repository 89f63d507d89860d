"""``python -m dlcluster_gym.cli``: the ``dlcluster`` command."""

from dlcluster_gym.cli import main

if __name__ == "__main__":
    main()
