// Compiled into the test executables when PATCHBOX_SANITIZE=thread: points ThreadSanitizer at
// cmake/tsan.supp (see there why the uninstrumented Rust side needs suppressions).
extern "C" const char* __tsan_default_options() {
  return "suppressions=" PATCHBOX_TSAN_SUPPRESSIONS;
}
