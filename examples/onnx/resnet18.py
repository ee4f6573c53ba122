"""Writes torchvision's ResNet-18 (random weights, no pretrained file) as ONNX
for dptrain to train on 3 x SIZE x SIZE images:

    python3 resnet18.py [OUT.onnx] [--size 224] [--classes 10]

Exported as smallnet.py is: in training mode without constant folding, so
that batch norm stays a node with its running statistics (dptrain trains
them) and the initializers carry the state_dict's names, which dptrain's
checkpoint keeps (torchvision's load_state_dict reads it back). The
graph's input is 2 x 3 x SIZE x SIZE; dptrain runs it at any batch size,
and SIZE must be what the transforms give (224 for --transform imagenet)."""
import argparse
import warnings
import torch
import torchvision

warnings.filterwarnings("ignore")  # torch 1.13 warns once per batch norm of its num_batches_tracked

p = argparse.ArgumentParser()
p.add_argument("out", nargs="?", default="resnet18.onnx")
p.add_argument("--size", type=int, default=224)
p.add_argument("--classes", type=int, default=10)
a = p.parse_args()
torch.manual_seed(0)
net = torchvision.models.resnet18(num_classes=a.classes)
torch.onnx.export(net, torch.zeros(2, 3, a.size, a.size), a.out,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["images"], output_names=["logits"])
print(f"wrote {a.out}: torchvision resnet18(num_classes={a.classes}), input 3x{a.size}x{a.size}")
