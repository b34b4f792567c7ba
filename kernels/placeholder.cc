// Replaced by the first kernel.
