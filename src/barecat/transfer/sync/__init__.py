"""``barecat rsync``: what an argument names (``locations``), listings compared into an
ordered action list by rsync's rules (``plan``), a directory or archive subtree listed and
changed (``trees``), and the run that ties them together (``driver``)."""
