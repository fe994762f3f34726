"""The pipeline's networks as native PyTorch modules (`torch.nn.Module`), for a trained run
exported by `python -m trainer.export_keras --output=model.pt` (docs/migration.md, "To PyTorch").

ResNet and InceptionV3 keep torchvision's parameter names (`torchvision.models.resnet18/50/...`,
`inception_v3`), so their state_dict loads into torchvision's classes; the CNN and the BiLSTM are
plain `torch.nn` modules. Where TensorFlow computes differently from PyTorch's defaults (a 'SAME'
max pool on an even map, a 'SAME' average pool's border), these modules compute as TensorFlow did
and say so. Needs only torch.
"""
