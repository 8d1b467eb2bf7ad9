"""Import paths of barecat 0.3.1's ``barecat.maintenance`` package, kept for code written
for it; each module is a thin layer over this package's own implementation."""
