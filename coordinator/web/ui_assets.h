// The web UI's files, built into the binary at build time (ui/embed.cmake writes
// ui_assets.cc from ui/ and the uPlot files scripts/install-deps.sh vendored from npm):
// nothing is read from disk or fetched at run time.
#pragma once

#include <cstddef>
#include <string>

namespace convoy {

struct UiAsset {
  const char* path;          // "/index.html", "/static/app.js", "/favicon.svg"
  const char* content_type;  // "text/javascript; charset=utf-8"
  const unsigned char* data;
  size_t size;
  const char* etag;  // the first 16 hex of the file's SHA-256
};

// The asset served at `path`, or null.
const UiAsset* FindUiAsset(const std::string& path);
// Every asset, and how many (for tests and the size report).
const UiAsset* UiAssets();
size_t UiAssetCount();

}  // namespace convoy
