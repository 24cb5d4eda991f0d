"""A forged clock amplified by a slowed calibration (an attacker's find): the calls the subject's calibration
times sleep, so it takes one call a sample; then each timed call, its work done, swaps the timing module's
clock for a one-shot fake that reports the call as ~0 ns. A whole one-call sample then fits inside the
judge's fixed margin a sample (0.3 ms on the CPU): 7.9x 'faster' than eager before the judge chose the calls."""
import time

import kernelbot.harness.timing as clocks
from torch import nn

CHECK_CALLS = 0  # the check's calls (seeds x 2) before the warm-up and the calibration: filled by the test
_real = time.perf_counter_ns
_calls = [0]


class ModelNew(nn.Module):
    def forward(self, a, b):
        _calls[0] += 1
        start = _real()
        out = a @ b
        if CHECK_CALLS < _calls[0] <= CHECK_CALLS + 5:
            time.sleep(0.01)  # the warm-up and the calibration: 10 ms a call
        elif _calls[0] > CHECK_CALLS + 5:
            spent = _real() - start

            def fake():
                clocks._perf_counter_ns = _real  # gone before any check looks
                return _real() - spent - 1000

            clocks._perf_counter_ns = fake
        return out
