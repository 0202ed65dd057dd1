// A backend plugin built with another ABI tag, as one left from an older build would be: the loader must
// refuse it by its tag before calling anything else (cli.starts_without_backends).
#include "impl/plugin_abi.hpp"

extern "C" const char* attncheck_plugin_abi() {
  return "stale-test-plugin: another build's tag";
}

extern "C" attncheck::impl::Implementation* attncheck_plugin_open(const char*) {
  return nullptr;
}
