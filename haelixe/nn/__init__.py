"""Neural-network building blocks on Haelixe tensors (PyTorch's torch.nn names)."""

from . import functional, init, utils
from .activations import LAYERS as _ACTIVATIONS
from .adaptive_softmax import AdaptiveLogSoftmaxWithLoss
from .containers import ModuleDict, ParameterDict, ParameterList
from .encoder_decoder import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .fused_layers import LAYERS as _FUSED_LAYERS
from .layers import Embedding, Flatten, Identity, NonDynamicallyQuantizableLinear
from .lazy import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    LazyLinear,
    LazyModuleMixin,
)
from .local_response import CrossMapLRN2d
from .loss_layers import BCELoss, BCEWithLogitsLoss, NLLLoss2d
from .module import Buffer, Module, ModuleList, Parameter, Sequential
from .multihead import MultiheadAttention
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from .parallel import DataParallel
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .spatial import Unflatten, Unfold
from .sync_batchnorm import SyncBatchNorm
from .transformer import MLP, MultiHeadAttention, RoPE, TransformerBlock
from .uninitialized import (
    UninitializedBuffer,
    UninitializedParameter,
    UninitializedTensorMixin,
    is_lazy,
)
from .upsampling import UpsamplingBilinear2d, UpsamplingNearest2d

globals().update(_ACTIVATIONS)  # (nn.ReLU, nn.LeakyReLU...: made from the op registry)
globals().update(_FUSED_LAYERS)  # (nn.Linear, nn.RMSNorm, nn.MSELoss...: from their declarations)

_MISSING: dict = {}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
