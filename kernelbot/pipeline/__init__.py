"""The review pipeline: detect changed operators, measure base against head, check and optimize,
store the results. Front ends (commands/, github/) call it; it calls agents/, analysis/ and harness/."""
