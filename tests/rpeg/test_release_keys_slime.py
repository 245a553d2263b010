"""benchmarks/release_keys/slime_parsers.py on small sources written like slime's, Megatron-LM's
and SGLang's (the real ones are read by benchmarks/release_keys/slime.py, which downloads)."""

from __future__ import annotations

import ast
import textwrap

from benchmarks.release_keys.slime_parsers import (
    SourceTree,
    argparse_flags,
    megatron_field_flags,
    megatron_flags,
    sglang_flags,
    skipped_sglang_args,
)

#: As slime/utils/arguments.py writes its flags (add_argument and reset_arg).
SLIME = """
def add(parser):
    parser.add_argument("--actor-num-nodes", type=int, default=1)
    parser.add_argument("--colocate", action="store_true", default=False)
    parser.add_argument("--offload-train", action=argparse.BooleanOptionalAction)
    parser.add_argument("--eval-prompt-data", type=str, nargs="+", default=None)
    parser.add_argument("--kl-coef", type=float, default=0.0)
    reset_arg(parser, "--micro-batch-size", type=int, default=1)
"""


def test_argparse_flags_and_their_types():
    flags = argparse_flags(SLIME, ("add_argument", "reset_arg"))
    assert flags == {
        "--actor-num-nodes": "int",
        "--colocate": "bool",
        "--offload-train": "bool",
        "--no-offload-train": "bool",  # BooleanOptionalAction's negative form
        "--eval-prompt-data": "list[str]",
        "--kl-coef": "float",
        "--micro-batch-size": "int",
    }
    assert "--micro-batch-size" not in argparse_flags(SLIME)  # reset_arg only when asked


def _field(source: str) -> ast.AnnAssign:
    (node,) = ast.parse(textwrap.dedent(source)).body
    assert isinstance(node, ast.AnnAssign)
    return node


def test_megatron_dataclass_fields_as_argument_group_factory_makes_them():
    """argument_utils.py: store_true for a False default, else --no- and --disable- names."""
    assert megatron_field_flags(_field("sequence_parallel: bool = False")) == {
        "--sequence-parallel": "bool"
    }
    assert megatron_field_flags(_field("bias_dropout_fusion: bool = True")) == {
        "--no-bias-dropout-fusion": "bool",
        "--disable-bias-dropout-fusion": "bool",
    }
    assert megatron_field_flags(_field("expert_tensor_parallel_size: Optional[int] = None")) == {
        "--expert-tensor-parallel-size": "int"
    }
    assert megatron_field_flags(
        _field("recompute_method: Optional[Literal['uniform']] = None")
    ) == {"--recompute-method": "str"}
    assert megatron_field_flags(_field("hidden: int = field(init=False, default=0)")) == {}
    meta = 'x: int | str = field(default=1, metadata={"argparse_meta": {"arg_names": ["--y"]}})'
    assert megatron_field_flags(_field(meta)) == {"--y": "str"}


MEGATRON = {
    "megatron/training/arguments.py": """
from megatron.core.transformer import TransformerConfig

def _add_network_size_args(parser):
    exclude = ["skipped_field"]
    factory = ArgumentGroupFactory(TransformerConfig, exclude=exclude)
    group = factory.build_group(parser, "transformer")
    group.add_argument('--num-layers', type=int, default=None)
""",
    "megatron/core/transformer/__init__.py": "from .transformer_config import TransformerConfig\n",
    "megatron/core/transformer/transformer_config.py": """
from ..model_parallel_config import ModelParallelConfig

@dataclass
class TransformerConfig(ModelParallelConfig):
    recompute_num_layers: Optional[int] = None
    skipped_field: int = 0
""",
    "megatron/core/model_parallel_config.py": """
@dataclass
class ModelParallelConfig:
    tensor_model_parallel_size: int = 1
""",
}


def test_megatron_flags_follow_imports_bases_and_exclusions():
    """The factory's dataclass is found through the package's re-export, with its base class's
    fields and without the excluded ones."""
    flags = megatron_flags(SourceTree(MEGATRON.get))
    assert flags == {
        "--num-layers": "int",
        "--recompute-num-layers": "int",
        "--tensor-model-parallel-size": "int",
    }


SERVER_ARGS = """
@dataclasses.dataclass
class ServerArgs:
    tp_size: A[int, Arg(help="tp", aliases=["--tensor-parallel-size"])] = 1
    ep_size: A[int, Arg(help="ep", aliases=["--expert-parallel-size", "--ep"])] = 1
    enable_dp_attention: A[bool, Arg(help="dp attention")] = False
    mem_fraction_static: A[Optional[float], "static memory"] = None
    disable_cuda_graph: A[bool, Arg(no_cli=True)] = False
    max_mamba_cache_size: A[int, Arg(no_cli=True)] = 0
    plain_field: int = 3

    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--disable-cuda-graph", action=DeprecatedStoreTrueAction)
        parser.add_argument("--old-name", type=int, dest="port")
"""


def test_sglang_flags_as_slime_registers_them():
    """Prefixed --sglang-, aliases kept, slime's skipped_args and no_cli fields left out."""
    skipped = skipped_sglang_args('skipped_args = ["tp_size", "port"]\n')
    assert skipped == {"tp_size", "port"}
    assert sglang_flags(SERVER_ARGS, skipped) == {
        "--sglang-ep-size": "int",
        "--sglang-expert-parallel-size": "int",
        "--sglang-ep": "int",
        "--sglang-enable-dp-attention": "bool",
        "--sglang-mem-fraction-static": "float",
        "--sglang-disable-cuda-graph": "bool",
    }
