"""Archives to and from other formats: tar and zip streams in (``tar_zip_import``) and out
(``tar_zip_export``), format names and compressions (``formats``), whole conversions
(``conversion``), ColdCrate chunks both ways (``coldcrate``), tars and zips indexed in
place (``wrapping``) and merges whose inputs may be tars and zips (``merging``). The
public names are :mod:`barecat.transfer`'s."""
