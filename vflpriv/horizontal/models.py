"""Models with named layers for horizontal federated learning (torch).

``layer_names`` lists the trainable layers in forward order; the last is the final fully connected
layer (FFC, always trained and uploaded by FedP3).  ``flatten_channels`` maps the first FC layer
after a convolution to the number of channels flattened into it, so FedP3's ordered dropout can drop
whole channels there.

FedP3's models (paper 002, Table 4) and FedDyn's, which FedElasticNet (paper 001) uses (notes A.7:
the code's FC 784-200-200-10 for MNIST, 199,210 parameters, and the CIFAR CNN conv5(3->64)-pool,
conv5(64->64)-pool, FC 1600-384-192-10, 797,962 parameters).
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ..errors import InputError


class LayeredModel(nn.Module):
    layer_names: tuple = ()
    flatten_channels: dict = {}

    def layer(self, name):
        return getattr(self, name)


class MLP(LayeredModel):
    """Fully connected ReLU network ``n_inputs -> hidden... -> n_classes``; layers fc1.., ffc."""

    def __init__(self, n_inputs: int, n_classes: int, hidden=(128, 128, 128), bias=True):
        super().__init__()
        sizes = [int(n_inputs), *map(int, hidden)]
        names = []
        for k in range(len(hidden)):
            setattr(self, f"fc{k + 1}", nn.Linear(sizes[k], sizes[k + 1], bias=bias))
            names.append(f"fc{k + 1}")
        self.ffc = nn.Linear(sizes[-1], int(n_classes), bias=bias)
        self.layer_names = (*names, "ffc")
        self.flatten_channels = {}

    def forward(self, x):
        x = x.flatten(1)
        for name in self.layer_names[:-1]:
            x = F.relu(getattr(self, name)(x))
        return self.ffc(x)


class SmallCNN(LayeredModel):
    """Two 3x3 convolutions, a 2x2 max-pool, two FC layers and the FFC: the paper's 5-layer CNN
    shape (Table 4) shrunk for 8x8 digits so it trains on a CPU in seconds."""

    def __init__(self, in_channels=1, image_size=8, n_classes=10, channels=(8, 16), hidden=(64, 64)):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels[0], 3, padding=1)
        self.conv2 = nn.Conv2d(channels[0], channels[1], 3, padding=1)
        flat = channels[1] * (image_size // 2) ** 2
        self.fc1 = nn.Linear(flat, hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.ffc = nn.Linear(hidden[1], n_classes)
        self.layer_names = ("conv1", "conv2", "fc1", "fc2", "ffc")
        self.flatten_channels = {"fc1": channels[1]}
        self.image_shape = (in_channels, image_size, image_size)

    def forward(self, x):
        x = x.reshape(x.shape[0], *self.image_shape)
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.ffc(x)


class PaperCNN(LayeredModel):
    """Paper 002, Table 4 (CIFAR10/100, FashionMNIST): conv5x5x64-ReLU-pool, conv5x5x64-ReLU-pool,
    FC 1600x1024-ReLU, FC 1024x1024-ReLU, FC 1024xclasses.  A 28x28 input needs padding 2 on the
    first convolution to reach the table's 1600-dim flatten (notes B.10)."""

    def __init__(self, in_channels=3, n_classes=10, image_size=32):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 5, padding=2 if image_size == 28 else 0)
        self.conv2 = nn.Conv2d(64, 64, 5)
        self.fc1 = nn.Linear(1600, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.ffc = nn.Linear(1024, n_classes)
        self.layer_names = ("conv1", "conv2", "fc1", "fc2", "ffc")
        self.flatten_channels = {"fc1": 64}
        self.image_shape = (in_channels, image_size, image_size)

    def forward(self, x):
        x = x.reshape(x.shape[0], *self.image_shape)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.ffc(x)


def paper_mlp(n_classes=10):
    """Paper 002, Table 4 (EMNIST-L): FC 784x1024, 1024x1024, 1024x1024 (ReLU), FC 1024x10."""
    return MLP(784, n_classes, hidden=(1024, 1024, 1024))


def paper_layer_counts(model: LayeredModel) -> dict:
    """Parameters per layer as paper 002's Table 4 counts them: convolutions with their biases,
    fully connected layers without (e.g. Conv1 on 3 channels 4,864; FC 1600x1024 1,638,400)."""
    out = {}
    for name in model.layer_names:
        mod = model.layer(name)
        n = mod.weight.numel()
        if isinstance(mod, nn.Conv2d) and mod.bias is not None:
            n += mod.bias.numel()
        out[name] = n
    return out


def build_model(name: str, n_inputs: int, n_classes: int, image_shape=None) -> LayeredModel:
    """``mlp`` (any data) or ``cnn`` (image data only)."""
    if name == "mlp":
        return MLP(n_inputs, n_classes)
    if name == "cnn":
        if image_shape is None:
            raise InputError("model 'cnn' needs image data (use --model mlp for this data set)")
        c, h, w = image_shape
        return SmallCNN(c, h, n_classes)
    raise InputError(f"unknown model {name!r}; choose mlp or cnn")


def feddyn_mlp(n_inputs=784, n_classes=10, hidden=(200, 200)) -> MLP:
    """FedDyn's MNIST model (notes A.7): FC 784-200-200-10, ReLU; 199,210 parameters."""
    return MLP(n_inputs, n_classes, hidden=hidden)


class FedDynCNN(LayeredModel):
    """FedDyn's CIFAR model (notes A.7): conv5(3->64)-ReLU-pool2, conv5(64->64)-ReLU-pool2,
    FC 1600-384-192-classes (the paper's "394" is a typo); 797,962 parameters for 10 classes."""

    def __init__(self, in_channels=3, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 5)
        self.conv2 = nn.Conv2d(64, 64, 5)
        self.fc1 = nn.Linear(1600, 384)
        self.fc2 = nn.Linear(384, 192)
        self.ffc = nn.Linear(192, n_classes)
        self.layer_names = ("conv1", "conv2", "fc1", "fc2", "ffc")
        self.flatten_channels = {"fc1": 64}
        self.image_shape = (in_channels, 32, 32)

    def forward(self, x):
        x = x.reshape(x.shape[0], *self.image_shape)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.ffc(x)
