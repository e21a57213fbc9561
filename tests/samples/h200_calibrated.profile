# An H200 as `ibp calibrate` measured it before it measured batch entries
# (bench/results/gpu/2026-12-04-h200-3/profile.txt): no ce_batch_setup_us,
# so an entry of a cuMemcpyBatchAsync is modelled set up like a copy of
# its own call (2.3 us).  The prior of tests/samples/check_learn_call.sh.
name = calibrated-NVIDIA-H200
decoder_build = decode-plan-4
stage_decoder_build = unknown
ce_h2d_gbps = 55.48
ce_d2h_gbps = 55.3
ce_setup_us = 2.323
runtime_call_us = 0.3
driver_copy_call_us = 2.055
driver_launch_call_us = 3.961
driver_call_us = 1.651
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 1.467
sm_h2d_gbps = 50.51
sm_read_rtt_us = 1.896
sm_inflight_bytes = 1806
sector_bytes = 32
dram_gbps = 4290
decode_gbps_per_sm = 8.269
decode_tensor_us = 0.03131
decode_h2d_gbps = 28.07
sms = 132
stage_decode_gbps_per_sm = 0.66
stage_tensor_us = 3.64
