"""What several families share (not families themselves): the Qwen VL prompt, tokens and sizing
(qwen.py), and Qwen2.5-VL's temporal positions as vLLM and Qwen compute them (qwen2_5_vl_positions.py)."""
