"""The augmentation's draws written from docs/reader.md ("Augmentation", Determinism), in plain
Python integers: the oracle the reader's tests compare tarmac's draws with."""

M64 = 2**64 - 1


def splitmix(z):
    """splitmix64's step on state z: add the golden gamma, then its finaliser."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def uniform(seed, epoch, i, k):
    """Draw k of sample i, in [0, 1)."""
    return (splitmix(splitmix(splitmix(splitmix(seed) ^ epoch) ^ i) ^ k) >> 11) / 2.0**53


def dataset_seed(seed, k):
    """Dataset k's augmentation seed in a MixedDataset."""
    return seed ^ ((k * 0x9E3779B97F4A7C15) & M64)
