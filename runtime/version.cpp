#include "version.h"

namespace vkt {

std::string_view version() {
  return VKT_VERSION;
}

}  // namespace vkt
