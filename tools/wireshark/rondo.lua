-- Wireshark dissector for Rondo's header over UDP (docs/wire.md, version 1).
--
--   wireshark -X lua_script:tools/wireshark/rondo.lua capture.pcap
--   tshark -X lua_script:tools/wireshark/rondo.lua -r capture.pcap -Y rondo
--
-- Registered on UDP ports 4792-5815 (Rondo's default: path i on 4792 + i; change
-- the range in Edit > Preferences > Protocols > Rondo) and as a heuristic on all
-- UDP, so ports chosen with `rondo perf --udp-port` are recognised too.

local rondo = Proto("rondo", "Rondo multipath transport")

local types = { [1] = "DATA", [2] = "PROBE", [3] = "ACK", [4] = "NAK" }
local fixed = { [1] = 48, [2] = 24, [3] = 56, [4] = 56 }
local nak_reasons = {
    [0] = "none (ACK)", [1] = "BUFFER_FULL", [2] = "OUT_OF_WINDOW",
    [3] = "SEQUENCE_ERROR", [4] = "OUT_OF_ORDER",
}

local f = rondo.fields
f.version = ProtoField.uint8("rondo.version", "Version")
f.type = ProtoField.uint8("rondo.type", "Type", base.DEC, types)
f.flags = ProtoField.uint8("rondo.flags", "Flags", base.HEX)
f.retx = ProtoField.bool("rondo.flags.retx", "RETX", 8, nil, 0x01)
f.ecn_echo = ProtoField.bool("rondo.flags.ecn_echo", "ECN_ECHO", 8, nil, 0x02)
f.first = ProtoField.bool("rondo.flags.first", "FIRST", 8, nil, 0x04)
f.last = ProtoField.bool("rondo.flags.last", "LAST", 8, nil, 0x08)
f.header_words = ProtoField.uint8("rondo.header_words", "Header length (words)")
f.path = ProtoField.uint16("rondo.path", "Path")
f.flow = ProtoField.uint32("rondo.flow", "Flow", base.HEX)
f.psn = ProtoField.uint32("rondo.psn", "PSN")
f.timestamp = ProtoField.uint64("rondo.timestamp_ns", "Timestamp (ns)")
f.msg_id = ProtoField.uint64("rondo.msg_id", "Message id")
f.msg_len = ProtoField.uint64("rondo.msg_len", "Message length")
f.offset = ProtoField.uint64("rondo.offset", "Offset")
f.payload_len = ProtoField.uint32("rondo.payload_len", "Payload length")
f.acked_psn = ProtoField.uint32("rondo.acked_psn", "Acked PSN")
f.cum_ack = ProtoField.uint32("rondo.cum_ack", "Cumulative ACK")
f.highest_psn = ProtoField.uint32("rondo.highest_psn", "Highest PSN")
f.acked_path = ProtoField.uint16("rondo.acked_path", "Acked path")
f.fb_flags = ProtoField.uint8("rondo.feedback_flags", "Feedback flags", base.HEX)
f.of_probe = ProtoField.bool("rondo.feedback_flags.of_probe", "OF_PROBE", 8, nil, 0x01)
f.duplicate = ProtoField.bool("rondo.feedback_flags.duplicate", "DUPLICATE", 8, nil, 0x02)
f.nak_reason = ProtoField.uint8("rondo.nak_reason", "NAK reason", base.DEC, nak_reasons)
f.echo_ts = ProtoField.uint64("rondo.echo_timestamp_ns", "Echoed timestamp (ns)")
f.rx_ts = ProtoField.uint64("rondo.rx_timestamp_ns", "Receive timestamp (ns)")
f.ext_type = ProtoField.uint8("rondo.ext.type", "Extension type", base.HEX)
f.ext_len = ProtoField.uint8("rondo.ext.len", "Extension length")
f.token = ProtoField.uint64("rondo.token", "Connection token", base.HEX)

local e_malformed = ProtoExpert.new("rondo.malformed", "Malformed Rondo header",
    expert.group.MALFORMED, expert.severity.ERROR)
rondo.experts = { e_malformed }

local port_pref = "4792-5815"
rondo.prefs.ports = Pref.range("UDP ports", port_pref, "UDP ports of Rondo", 65535)

-- True when `buf` looks like a Rondo version 1 header.
local function plausible(buf)
    if buf:len() < 24 then return false end
    local version, kind = buf(0, 1):uint(), buf(1, 1):uint()
    if version ~= 1 or fixed[kind] == nil then return false end
    local hlen = buf(3, 1):uint() * 4
    return hlen >= fixed[kind] and hlen <= buf:len() and bit.band(buf(2, 1):uint(), 0xf0) == 0
end

function rondo.dissector(buf, pinfo, tree)
    if buf:len() < 24 then return 0 end
    pinfo.cols.protocol = "Rondo"
    local kind = buf(1, 1):uint()
    local hlen = buf(3, 1):uint() * 4
    local t = tree:add(rondo, buf(0, math.min(math.max(hlen, 24), buf:len())))
    t:add(f.version, buf(0, 1))
    t:add(f.type, buf(1, 1))
    local fl = t:add(f.flags, buf(2, 1))
    fl:add(f.retx, buf(2, 1)); fl:add(f.ecn_echo, buf(2, 1))
    fl:add(f.first, buf(2, 1)); fl:add(f.last, buf(2, 1))
    t:add(f.header_words, buf(3, 1))
    t:add(f.path, buf(4, 2))
    t:add(f.flow, buf(8, 4))
    t:add(f.psn, buf(12, 4))
    t:add(f.timestamp, buf(16, 8))
    local need = fixed[kind]
    if need == nil or hlen < need or hlen > buf:len() then
        t:add_proto_expert_info(e_malformed, "unknown type or bad header length")
        return buf:len()
    end
    local name = types[kind]
    local info = string.format("%s path %d flow 0x%x", name, buf(4, 2):uint(), buf(8, 4):uint())
    if kind == 1 then
        t:add(f.msg_id, buf(24, 8))
        t:add(f.msg_len, buf(32, 8))
        t:add(f.offset, buf(40, 8))
        t:add(f.payload_len, buf:len() - hlen):set_generated()
        info = info .. string.format(" PSN %d len %d", buf(12, 4):uint(), buf:len() - hlen)
    elseif kind == 2 then
        info = info .. string.format(" probe %d", buf(12, 4):uint())
    else
        t:add(f.acked_psn, buf(24, 4))
        t:add(f.cum_ack, buf(28, 4))
        t:add(f.highest_psn, buf(32, 4))
        t:add(f.acked_path, buf(36, 2))
        local ff = t:add(f.fb_flags, buf(38, 1))
        ff:add(f.of_probe, buf(38, 1)); ff:add(f.duplicate, buf(38, 1))
        t:add(f.nak_reason, buf(39, 1))
        t:add(f.echo_ts, buf(40, 8))
        t:add(f.rx_ts, buf(48, 8))
        info = info .. string.format(" acked %d cum %d", buf(24, 4):uint(), buf(28, 4):uint())
    end
    -- Extensions between the fixed part and the header's end (type 0: one-byte pad).
    local at = need
    while at < hlen do
        local et = buf(at, 1):uint()
        if et == 0 then
            at = at + 1
        else
            if at + 2 > hlen then
                t:add_proto_expert_info(e_malformed, "extension runs past the header")
                break
            end
            local len = buf(at + 1, 1):uint()
            if at + 2 + len > hlen then
                t:add_proto_expert_info(e_malformed, "extension runs past the header")
                break
            end
            if et == 0x82 and len == 8 then
                t:add(f.token, buf(at + 2, 8))
            else
                t:add(f.ext_type, buf(at, 1))
                t:add(f.ext_len, buf(at + 1, 1))
            end
            at = at + 2 + len
        end
    end
    pinfo.cols.info = info
    return buf:len()
end

local function heuristic(buf, pinfo, tree)
    if not plausible(buf) then return false end
    rondo.dissector(buf, pinfo, tree)
    return true
end

local udp_port = DissectorTable.get("udp.port")
udp_port:add(port_pref, rondo)
rondo:register_heuristic("udp", heuristic)

function rondo.prefs_changed()
    udp_port:remove(port_pref, rondo)
    port_pref = tostring(rondo.prefs.ports)
    udp_port:add(port_pref, rondo)
end
