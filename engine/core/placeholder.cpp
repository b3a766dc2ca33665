// placeholder until kv_cache.cpp lands
namespace twin {}
