# libibp's model (IBP_PROFILE) for core_stage_quarter.sh:
# tests/preload/kernel_path.profile with the host link at 1 GB/s, host
# reads by the kernel at 0.1 GB/s (the zero-copy route never the faster)
# and the exponent stage decoding at 0.016 GB/s per SM, so that on the
# staged route's 32 SMs (IBP_MAX_SMS) the stage's decode of a quarter of
# 8 MiB (~4.1 ms) hides behind the link's copy (~8 ms) and the stage
# pays, while its decode of all 8 MiB (~16.4 ms) would not -- a test's
# profile, not a measurement.
name = stage-quarter-test
ce_h2d_gbps = 1
ce_d2h_gbps = 0.1
ce_setup_us = 1000
runtime_call_us = 0.3
driver_copy_call_us = 100
driver_launch_call_us = 0.1
driver_call_us = 0.1
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 0.1
sm_h2d_gbps = 1000
sm_read_rtt_us = 0.01
sm_inflight_bytes = 1000000
sector_bytes = 32
dram_gbps = 10000
decode_gbps_per_sm = 1000
decode_tensor_us = 0
decode_h2d_gbps = 0.1
sms = 132
stage_decode_gbps_per_sm = 0.016
stage_tensor_us = 0
