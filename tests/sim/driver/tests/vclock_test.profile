# Round numbers for test_simcuda_vclock (hand-computed expectations there);
# not a device.
name = vclock-test
ce_h2d_gbps = 10
ce_d2h_gbps = 5
ce_setup_us = 1
ce_batch_setup_us = 0.25
runtime_call_us = 0.25
driver_copy_call_us = 2
driver_launch_call_us = 3
driver_call_us = 0.5
ibp_hold_us = 0.17
batch_deadline_us = 100
launch_latency_us = 4
sm_h2d_gbps = 8
sm_read_rtt_us = 1
sm_inflight_bytes = 1000
sector_bytes = 32
dram_gbps = 1000
decode_gbps_per_sm = 100
decode_tensor_us = 0
decode_h2d_gbps = 8
sms = 16
stage_decode_gbps_per_sm = 50
stage_tensor_us = 1
