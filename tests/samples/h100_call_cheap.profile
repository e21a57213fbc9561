# A truth for the simulated GPU (SIMCUDA_PROFILE): the built-in h100-pcie5
# changed as profile/truth/h100-pcie5-cecheap.prof ((c): runtime_call_us,
# driver_call_us x 0.5, ce_setup_us x 0.3) and its driver copy call at
# 0.05 us -- a driver whose copies cost less than libibp holding a row for
# a batched launch (ibp_hold_us, 0.65 us).  Not a device: a GPU on which the
# built-in is wrong, for tests/samples/check_learn_alone.sh.
name = h100-pcie5-call-cheap
ce_h2d_gbps = 55
ce_d2h_gbps = 55
ce_setup_us = 0.3
runtime_call_us = 0.15
driver_copy_call_us = 0.05
driver_launch_call_us = 2.5
driver_call_us = 0.25
ibp_hold_us = 0.65
batch_deadline_us = 100
launch_latency_us = 3
sm_h2d_gbps = 35
sm_read_rtt_us = 1.2
sm_inflight_bytes = 32768
sector_bytes = 32
dram_gbps = 2000
decode_gbps_per_sm = 3.17
decode_tensor_us = 0.096
decode_h2d_gbps = 28.8
sms = 114
stage_decode_gbps_per_sm = 1.29
stage_tensor_us = 0
