#pragma once
// The opening of the self-contained HTML reports (plan.html, validate's
// report.html): doctype, title and the style both share, then each page's
// own rules. The body is the caller's to write and close.
#include <string>

namespace twin {

inline std::string html_page_head(const std::string& title, int max_width_px, const std::string& extra_css) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + title +
         "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;max-width:" + std::to_string(max_width_px) +
         "px;color:#222}\ntable{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px "
         "8px;text-align:right}\n" +
         extra_css + "</style>\n</head>\n<body>\n";
}

}  // namespace twin
