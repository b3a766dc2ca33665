#pragma once
// tools/plot/validate.gp, compiled in (validate/CMakeLists.txt).
namespace twin {
const char* validate_plot_script();
}
