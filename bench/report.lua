-- wrk script: cycle through the paths listed in a file (one per line) and print a JSON summary.
-- usage: wrk ... -s bench/report.lua http://127.0.0.1:PORT -- paths.txt
local paths = {}
local counter = 0

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then paths[#paths + 1] = line end
  end
  -- each thread starts at a different offset so threads do not ask for the same page at once
  counter = math.random(#paths)
end

function request()
  counter = counter % #paths + 1
  return wrk.format("GET", paths[counter])
end

function done(summary, latency, requests)
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "non2xx": %d, "socket_errors": %d, '
    .. '"p50_us": %d, "p90_us": %d, "p99_us": %d, "mean_us": %.1f, "max_us": %d}\n',
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
