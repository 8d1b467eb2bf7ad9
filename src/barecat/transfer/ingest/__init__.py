"""Files and trees into an archive: what to store (``sources``), storing it with reader
threads (``threads``) or with several processes (``processes``), and the samples a zstd
dictionary is trained on (``dictionary_samples``). The public names are
:mod:`barecat.transfer`'s."""
