"""Terminal user interfaces: ``barecat ncdu`` and ``barecat browse`` (Textual, the ``tui``
extra, imported only when one of them runs)."""
