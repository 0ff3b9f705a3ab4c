/* A C program built against an installed hxrt through find_package(hxrt) and hxrt::capi (libhxrt.so). */
#include <stdio.h>

#include "hxrt/hxrt.h"

int main(void) {
  hxrt_session* session = NULL;
  hxrt_buffer* buffer = NULL;
  int clean = 0;
  if (hxrt_abi_version() != HXRT_ABI_VERSION) return 1;
  if (hxrt_session_create("cpu", &session) != HXRT_OK ||
      hxrt_buffer_allocate(session, NULL, 1 << 20, &buffer) != HXRT_OK || hxrt_buffer_free(buffer) != HXRT_OK ||
      hxrt_session_close(session, &clean, NULL) != HXRT_OK) {
    fprintf(stderr, "%s\n", hxrt_last_error_message());
    return 1;
  }
  printf("find_package(hxrt) C consumer: libhxrt %s, ABI %u, clean teardown %d\n", hxrt_version_string(),
         hxrt_abi_version(), clean);
  return clean ? 0 : 1;
}
