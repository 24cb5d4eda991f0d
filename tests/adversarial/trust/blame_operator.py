"""Attack: raise the harness's own Failure with a status and extra fields of its choosing (blame the operator,
claim ok, and a max_abs_err that is no number)."""

import kernelbot.harness.inputs as harness_inputs
from torch import nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        raise harness_inputs.Failure("operator_error", "the operator is broken, not me", ok=True, max_abs_err="boom")
