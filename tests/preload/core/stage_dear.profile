# Both libibp's model (IBP_PROFILE) and the simulated GPU's costs
# (SIMCUDA_PROFILE) for core_stage.sh's `model` and `model_staged` cases:
# tests/preload/kernel_path.profile with host reads and the copy engine at
# 10 GB/s and the exponent stage decoding at 0.15 GB/s per SM, so that a
# copy's time turns on the stage's decode and the stage still pays --
# a test's profile, not a measurement.
name = stage-dear-test
ce_h2d_gbps = 10
ce_d2h_gbps = 0.1
ce_setup_us = 1000
runtime_call_us = 0.3
driver_copy_call_us = 100
driver_launch_call_us = 0.1
driver_call_us = 0.1
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 0.1
sm_h2d_gbps = 10
sm_read_rtt_us = 0.01
sm_inflight_bytes = 1000000
sector_bytes = 32
dram_gbps = 10000
decode_gbps_per_sm = 1000
decode_tensor_us = 0
decode_h2d_gbps = 10
sms = 132
stage_decode_gbps_per_sm = 0.15
stage_tensor_us = 0
