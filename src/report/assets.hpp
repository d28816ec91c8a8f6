#pragma once
// The browser builds of Vega, Vega-Lite and vega-embed, embedded into the binary at build
// time (src/report/embed_assets.cmake, from the versions pinned in
// src/report/vega/package-lock.json), so that report.html needs no network and no file
// beside it.
#include <string_view>

namespace normlab {

/// One embedded script: its minified JavaScript (UTF-8, no "</script" inside: checked by
/// a test) and its npm package version.
struct EmbeddedScript {
    std::string_view js;
    std::string_view version;
};

/// vega (build/vega.min.js): the runtime; defines the global `vega`.
EmbeddedScript vega_script();
/// vega-lite (build/vega-lite.min.js): compiles Vega-Lite to Vega; defines `vegaLite`.
EmbeddedScript vega_lite_script();
/// vega-embed (build/vega-embed.min.js): renders a spec into an element; defines `vegaEmbed`.
EmbeddedScript vega_embed_script();

}  // namespace normlab
