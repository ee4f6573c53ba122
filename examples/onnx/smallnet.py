"""Writes a small CNN with a residual block, a concatenation of two branches
(one depthwise) and Hardswish, for 1x28x28 images, as ONNX:

    python3 smallnet.py [OUT.onnx]    (default smallnet.onnx)

Exported in training mode without constant folding, so that batch norm
stays a node with its running statistics (dptrain trains them) and the
initializers carry the state_dict's names."""
import sys
import torch
from torch import nn


class Block(nn.Module):
    """conv-bn-relu-conv-bn plus the input, then ReLU (ResNet's BasicBlock)."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class SmallNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.block = Block(32)
        # two branches concatenated along the channels (Inception's way)
        self.wide = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=32)
        self.head = nn.Sequential(nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(64, classes))

    def forward(self, x):
        x = self.block(self.stem(x))
        return self.head(torch.cat([self.wide(x), self.depthwise(x)], 1))


torch.manual_seed(0)
net = SmallNet()
torch.onnx.export(net, torch.zeros(2, 1, 28, 28), sys.argv[1] if len(sys.argv) > 1 else "smallnet.onnx",
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["images"], output_names=["logits"])
print(sum(p.numel() for p in net.parameters()), "parameters")
