/* Names and messages of ibp_status, generated from IBP_STATUS_LIST. */
#include "ibp/codec.h"

const char *ibp_status_name(ibp_status s) {
  switch (s) {
#define IBP_STATUS_NAME_(name, value, msg)                                     \
  case name:                                                                   \
    return #name;
    IBP_STATUS_LIST(IBP_STATUS_NAME_)
#undef IBP_STATUS_NAME_
  }
  return "IBP_ERR_UNKNOWN";
}

const char *ibp_status_message(ibp_status s) {
  switch (s) {
#define IBP_STATUS_MSG_(name, value, msg)                                      \
  case name:                                                                   \
    return msg;
    IBP_STATUS_LIST(IBP_STATUS_MSG_)
#undef IBP_STATUS_MSG_
  }
  return "unknown error";
}
