"""An archive mounted as a directory (FUSE, through mfusepy over the system's libfuse3)."""

from barecat.mount.running import check_fuse, is_mounted, mount_archive, unmount

__all__ = ["check_fuse", "is_mounted", "mount_archive", "unmount"]
