"""Data for vertical (featurewise) federated learning: matrices, partitions, loaders."""
from .dataset import VerticalData, as_labels, as_matrix
from .loaders import load, make_synthetic, parse_synthetic
from .named import NAMES as DATASETS
from .named import NamedData, datasets_dir, load_named, provenance
from .partition import (balanced_partition, group_partition, make_partition, parse_groups,
                        random_partition)

__all__ = ["VerticalData", "as_matrix", "as_labels", "load", "make_synthetic", "parse_synthetic",
           "balanced_partition", "random_partition", "group_partition", "make_partition",
           "parse_groups", "DATASETS", "NamedData", "datasets_dir", "load_named", "provenance"]
