-- faults.lua - the fault-injecting half of the test nginx.
--
-- URLs /fault/<spec>/<path> serve <path> from the root, misbehaving as
-- <spec> says.  Counters are kept per full URI in the shared dict cf_hits,
-- so "fail the first N requests, then succeed" is scriptable; /_hits?uri=U
-- reads one counter and /_reset clears them all.
--
--   status-CODE-N     first N requests answer CODE (N = 0: always); 403
--                     carries an S3 XML <Code>AccessDenied</Code> body
--   az403             403 with x-ms-error-code: AuthenticationFailed
--   after-CODE-N      requests after the first N answer CODE (403: the
--                     AccessDenied body, as credentials or a presigned URL
--                     that expire during a run)
--   retryafter-S-N    first N requests: 429 with Retry-After: S
--   reset-N           first N requests: connection closed, no response
--   truncate-N        first N requests: half the body, then the connection
--                     drops (headers announce the full length)
--   halve             every request: the first half of its body (rounded
--                     up), then the connection drops; each resume is a new
--                     range and is cut too, until one byte is left
--   storm-A-B         requests 1..A answer 503, the next B are served, the
--                     one after answers 503 once, then all are served
--   slow-N            first N requests: headers and 1 KiB, then a stall
--   hang-N            requests after the first N: no answer for 120 s
--   wait-S-N          first N requests: no answer for S seconds, then the
--                     file as usual (a slow first byte: hedged requests)
--   full200           Range ignored: 200 with the whole object, always
--   badrange-N        first N requests: 206 whose Content-Range is off by one
--   etag-change       ETag "v1" for the first request, "v2" after; If-Match
--                     honoured (412 on mismatch)
--   etag-ignore       like etag-change but If-Match ignored
--   etag-drop         ETag "v1" for the first request, none after;
--                     If-Match ignored
--   noetag            no ETag, a fixed Last-Modified; If-Unmodified-Since
--                     honoured (412 when the object is newer)
--   noetag-lmchange   no ETag; Last-Modified T1 for the first request, T2
--                     after; If-Unmodified-Since honoured
--   noetag-lmchangeignore   the same, If-Unmodified-Since ignored
--   weaketag-lmchange weak ETag W/"w1" always, Last-Modified as lmchange;
--                     If-Unmodified-Since honoured
--   noetag-grow       no ETag, no Last-Modified; the object is one byte
--                     longer after the first request
--   redirect-same     302 to /<path> on this server
--   redirect-other    302 to the same path and scheme on host "localhost"
--                     (another host name for the same server)
-- With a latency, /_hits?uri=__waves counts the waves of requests: those
-- that arrived while no other was in flight (sequential round trips).
-- Each request's Authorization, If-Match and If-Unmodified-Since headers
-- are kept per URI: /_hits?auth=1&uri=U, /_hits?im=1&uri=U and
-- /_hits?ius=1&uri=U return the last ones.
local M = {}

local hits = ngx.shared.cf_hits

function M.access()
    local uri = ngx.var.uri
    local control = uri == "/_hits" or uri == "/_reset"
    if not ngx.req.is_internal() and not control then
        hits:incr(uri, 1, 0)
        hits:incr("__all", 1, 0)
        local h = ngx.req.get_headers()
        hits:set("auth:" .. uri, h["authorization"] or "")
        hits:set("im:" .. uri, h["if-match"] or "")
        hits:set("ius:" .. uri, h["if-unmodified-since"] or "")
    end
    local lat = tonumber(ngx.var.cf_latency) or 0
    -- The slow tail of an object store: this share of requests waits
    -- cf_tail_s more (Nginx(tail=(share, seconds))).
    local tail = tonumber(ngx.var.cf_tail_p) or 0
    if tail > 0 and not control and not ngx.req.is_internal()
            and math.random() < tail then
        lat = lat + (tonumber(ngx.var.cf_tail_s) or 0)
    end
    if lat > 0 and not ngx.req.is_internal() and not control then
        -- A request that finds none other in flight starts a "wave": the
        -- round trips a client waited for one after the other (requests
        -- sent together arrive within the latency of each other).
        if hits:incr("__inflight", 1, 0) == 1 then
            hits:incr("__waves", 1, 0)
        end
        ngx.sleep(lat)
        hits:incr("__inflight", -1, 0)
    end
end

function M.hits()
    local args = ngx.req.get_uri_args()
    local uri = args.uri or "__all"
    if args.auth then
        ngx.say(hits:get("auth:" .. uri) or "")
        return
    end
    if args.im then
        ngx.say(hits:get("im:" .. uri) or "")
        return
    end
    if args.ius then
        ngx.say(hits:get("ius:" .. uri) or "")
        return
    end
    ngx.say(hits:get(uri) or 0)
end

function M.reset()
    hits:flush_all()
    ngx.say("ok")
end

local function read_file(path)
    local f = io.open(ngx.var.document_root .. "/" .. path, "rb")
    if not f then return nil end
    local d = f:read("*a")
    f:close()
    return d
end

-- Parse a single "bytes=a-b" / "bytes=a-" / "bytes=-n" against size.
local function parse_range(h, size)
    if not h then return nil end
    local a, b = h:match("^bytes=(%d*)-(%d*)$")
    if not a then return nil end
    if a == "" then
        local n = tonumber(b)
        if not n or n == 0 then return nil end
        if n > size then n = size end
        return size - n, size - 1
    end
    a = tonumber(a)
    b = (b == "") and size - 1 or tonumber(b)
    if b >= size then b = size - 1 end
    if a > b then return "416" end
    return a, b
end

-- Serve a range by hand so that headers and body can be bent.
-- opts: etag (false: none), last_modified, honour_ius, grow (append this
-- to the object), shift (Content-Range off by this), cut (send only this
-- fraction of the body, then drop), halve (half, rounded up, then drop),
-- stall (send 1 KiB then sleep).
local function serve(path, opts)
    local data = read_file(path)
    if not data then return ngx.exit(404) end
    if opts.grow then data = data .. opts.grow end
    local size = #data
    local etag = opts.etag
    if etag == nil then etag = '"' .. ngx.md5(data) .. '"' end
    local im = ngx.var.http_if_match
    if im and opts.honour_if_match ~= false and im ~= etag and im ~= "*" then
        return ngx.exit(412)
    end
    local ius = ngx.var.http_if_unmodified_since
    if ius and opts.honour_ius and opts.last_modified and
            (ngx.parse_http_time(ius) or 0) < ngx.parse_http_time(opts.last_modified) then
        return ngx.exit(412)
    end
    local a, b = parse_range(ngx.var.http_range, size)
    if a == "416" then
        ngx.header["Content-Range"] = "bytes */" .. size
        return ngx.exit(416)
    end
    if etag then ngx.header["ETag"] = etag end
    if opts.last_modified then ngx.header["Last-Modified"] = opts.last_modified end
    ngx.header["Accept-Ranges"] = "bytes"
    local body
    if a then
        ngx.status = 206
        local s = opts.shift or 0
        ngx.header["Content-Range"] = string.format("bytes %d-%d/%d", a + s, b + s, size)
        body = data:sub(a + 1, b + 1)
    else
        ngx.status = 200
        body = data
    end
    ngx.header["Content-Length"] = #body
    if opts.halve and #body > 1 then
        ngx.print(body:sub(1, math.ceil(#body / 2)))
        ngx.flush(true)
        return ngx.exit(ngx.ERROR)
    end
    if opts.cut then
        ngx.print(body:sub(1, math.floor(#body * opts.cut)))
        ngx.flush(true)
        return ngx.exit(ngx.ERROR)
    end
    if opts.stall then
        ngx.print(body:sub(1, 1024))
        ngx.flush(true)
        ngx.sleep(opts.stall)
        return ngx.exit(ngx.ERROR)
    end
    ngx.print(body)
end

-- 403 with an S3 AccessDenied body.
local function access_denied()
    ngx.status = 403
    ngx.header["Content-Type"] = "application/xml"
    ngx.print('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>')
    return ngx.exit(403)
end

-- Answer CODE (403: AccessDenied).
local function answer(code)
    if code == 403 then return access_denied() end
    ngx.status = code
    ngx.print("fault " .. code)
    return ngx.exit(code)
end

local function first_n(n)
    n = tonumber(n) or 0
    return n == 0 or (hits:get(ngx.var.uri) or 0) <= n
end

local function pass(path)
    return ngx.exec("/_files/" .. path)
end

function M.fault()
    local spec, path = ngx.var.uri:match("^/fault/([^/]+)/(.+)$")
    if not spec then return ngx.exit(400) end
    local kind, p1, p2 = spec:match("^([%a%d]+)%-?([^-]*)%-?([^-]*)$")
    if kind == "status" then
        if first_n(p2) then return answer(tonumber(p1)) end
        return pass(path)
    elseif kind == "after" then
        if (hits:get(ngx.var.uri) or 0) > (tonumber(p2) or 0) then
            return answer(tonumber(p1))
        end
        return pass(path)
    elseif kind == "az403" then
        ngx.status = 403
        ngx.header["x-ms-error-code"] = "AuthenticationFailed"
        ngx.print("<Error><Code>AuthenticationFailed</Code></Error>")
        return ngx.exit(403)
    elseif kind == "retryafter" then
        if first_n(p2) then
            ngx.status = 429
            ngx.header["Retry-After"] = p1
            ngx.print("slow down")
            return ngx.exit(429)
        end
        return pass(path)
    elseif kind == "reset" then
        if first_n(p1) then return ngx.exit(444) end
        return pass(path)
    elseif kind == "truncate" then
        if first_n(p1) then return serve(path, {cut = 0.5}) end
        return serve(path, {})
    elseif kind == "halve" then
        return serve(path, {halve = true})
    elseif kind == "storm" then
        local n = hits:get(ngx.var.uri) or 0
        local a, b = tonumber(p1) or 0, tonumber(p2) or 0
        if n <= a or n == a + b + 1 then
            ngx.status = 503
            ngx.print("storm")
            return ngx.exit(503)
        end
        return pass(path)
    elseif kind == "slow" then
        if first_n(p1) then return serve(path, {stall = 30}) end
        return serve(path, {})
    elseif kind == "wait" then
        if first_n(p2) then ngx.sleep(tonumber(p1) or 0) end
        return pass(path)
    elseif kind == "hang" then
        if (hits:get(ngx.var.uri) or 0) > (tonumber(p1) or 0) then
            ngx.sleep(120)
        end
        return pass(path)
    elseif kind == "full200" then
        return ngx.exec("/_norange/" .. path)
    elseif kind == "badrange" then
        if first_n(p1) then return serve(path, {shift = 1}) end
        return serve(path, {})
    elseif kind == "etag" then
        local n = hits:get(ngx.var.uri) or 0
        if p1 == "drop" then
            return serve(path, {etag = (n <= 1) and '"v1"' or false,
                                honour_if_match = false})
        end
        local etag = (n <= 1) and '"v1"' or '"v2"'
        return serve(path, {etag = etag, honour_if_match = (p1 ~= "ignore")})
    elseif kind == "noetag" or kind == "weaketag" then
        local n = hits:get(ngx.var.uri) or 0
        local t1, t2 = "Mon, 01 Jan 2024 00:00:00 GMT", "Tue, 02 Jan 2024 00:00:00 GMT"
        local etag = (kind == "weaketag") and 'W/"w1"' or false
        if p1 == "grow" then
            return serve(path, {etag = false, grow = (n > 1) and "x" or nil})
        end
        local lm = t1
        if p1 == "lmchange" or p1 == "lmchangeignore" then
            lm = (n <= 1) and t1 or t2
        end
        return serve(path, {etag = etag, last_modified = lm,
                            honour_ius = (p1 ~= "lmchangeignore")})
    elseif kind == "redirect" then
        if p1 == "same" then
            return ngx.redirect("/" .. path, 302)
        end
        return ngx.redirect(ngx.var.scheme .. "://localhost:" .. ngx.var.server_port .. "/" .. path, 302)
    end
    return ngx.exit(400)
end

return M
