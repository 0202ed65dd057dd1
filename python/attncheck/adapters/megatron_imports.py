"""What every rank of attncheck.adapters.megatron_core imports, imported once: the RankPool's fork
server preloads this module, so the ranks are forked with Megatron-Core already in memory instead of
each importing it (torch and Megatron-Core: ~7 CPU-seconds per process). Megatron-Core warns on import
that Transformer Engine and Apex are absent; the CPU float64 path uses neither, so the warnings are
silenced here as setup() silences them in each rank."""
import warnings

warnings.filterwarnings("ignore")

import megatron.core  # noqa: E402,F401
import megatron.core.distributed  # noqa: E402,F401
import megatron.core.distributed.finalize_model_grads  # noqa: E402,F401
import megatron.core.fusions.fused_softmax  # noqa: E402,F401
import megatron.core.inference.contexts  # noqa: E402,F401
import megatron.core.models.common.embeddings.rotary_pos_embedding  # noqa: E402,F401
import megatron.core.models.gpt.gpt_layer_specs  # noqa: E402,F401
import megatron.core.parallel_state  # noqa: E402,F401
import megatron.core.process_groups_config  # noqa: E402,F401
import megatron.core.tensor_parallel.random  # noqa: E402,F401
import megatron.core.transformer.enums  # noqa: E402,F401
import megatron.core.transformer.transformer_config  # noqa: E402,F401
import megatron.core.transformer.utils  # noqa: E402,F401
