"""Where barecat 0.3.1 kept its core classes; only ``barecat.core.index`` is kept, for
code written after 0.3.1's merge how-to (``from barecat.core.index import Index``)."""
