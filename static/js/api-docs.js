// The API reference page (Swagger UI, drf-spectacular's template) states its language, which
// that template's <html> element does not; a file, since the site's CSP allows no inline script.
document.documentElement.lang = "en";
