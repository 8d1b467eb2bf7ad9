"""An archive mounted as a directory (FUSE, through mfusepy over the system's libfuse3)."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.mount.running import check_fuse, is_mounted, mount_archive, unmount
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {"barecat.mount.running": ["check_fuse", "is_mounted", "mount_archive", "unmount"]},
    )

__all__ = ["check_fuse", "is_mounted", "mount_archive", "unmount"]
