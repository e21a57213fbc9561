/* libibp_codec.so is the codec library (codec/) linked whole; this file
 * only gives the shared library a source of its own (cmake/install/). */
#include "ibp/codec.h"
