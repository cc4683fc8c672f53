"""PyTorch's torch.utils paths: ``haelixe.utils.data`` is haelixe.data's datasets,
samplers and DataLoader under the names torch.utils.data gives them."""
