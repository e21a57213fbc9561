# batch.profile with a deadline of a second (CMakeLists.txt:
# e2e_batch_full): copies are held until the job list is full or an
# ordering point comes.
name = batch-long-test
ce_h2d_gbps = 25.5
ce_d2h_gbps = 25.5
ce_setup_us = 1
runtime_call_us = 0.3
driver_copy_call_us = 2.2
driver_launch_call_us = 2.5
driver_call_us = 0.5
ibp_hold_us = 0.17
batch_deadline_us = 1000000
launch_latency_us = 3
sm_h2d_gbps = 25
sm_read_rtt_us = 1.5
sm_inflight_bytes = 32768
sector_bytes = 32
dram_gbps = 1555
decode_gbps_per_sm = 1000
decode_tensor_us = 0
decode_h2d_gbps = 25
sms = 108
stage_decode_gbps_per_sm = 1000
stage_tensor_us = 0
