//! Sending one window of TFTP DATA packets on a transfer's connected, blocking UDP socket. The
//! packets are laid out back to back in one reused buffer and handed to the kernel with UDP
//! generic segmentation offload (GSO, Linux 4.18+: one `sendmsg` with a `UDP_SEGMENT` size cuts
//! the buffer into exactly the datagrams a send per packet would make), so a window of 16 blocks
//! costs one trip through the network stack instead of 16. Where the kernel or the route refuses
//! GSO (no checksum offload on the device, a block larger than the path's MTU), the transfer falls
//! back to one `send` per packet for good. It owns no protocol decision (that is `session`) and
//! opens no file or socket (that is `server`).

use std::net::UdpSocket;

use super::session::data_header;

/// Most segments the kernel accepts in one GSO send (`UDP_MAX_SEGMENTS`).
const MAX_SEGMENTS: usize = 64;
/// Largest UDP payload of one send: the IPv4 total length limit less the IP and UDP headers.
const MAX_PAYLOAD: usize = 65_507;

/// A window's packets, built in place and sent in as few system calls as the kernel allows.
pub struct Burst {
    /// DATA packets back to back: header and payload, each `4 + blksize` bytes but the last.
    wire: Vec<u8>,
    /// Bytes of one full packet, the GSO segment size.
    segment: usize,
    /// Packets in `wire`.
    packets: usize,
    /// Whether GSO is still worth trying on this socket.
    gso: bool,
}

impl Burst {
    /// A burst for blocks of `blksize` bytes, windows of up to `windowsize` blocks.
    pub fn new(blksize: usize, windowsize: u16) -> Burst {
        let segment = 4 + blksize;
        Burst {
            wire: Vec::with_capacity(segment * usize::from(windowsize.max(1))),
            segment,
            packets: 0,
            // One packet per window has nothing to batch.
            gso: cfg!(target_os = "linux") && windowsize > 1 && segment <= MAX_PAYLOAD,
        }
    }

    /// Start a new window.
    pub fn clear(&mut self) {
        self.wire.clear();
        self.packets = 0;
    }

    /// Append the DATA packet of wire block `block` carrying `payload` (at most blksize bytes;
    /// only the window's last packet may be shorter).
    pub fn push(&mut self, block: u16, payload: &[u8]) {
        self.wire.extend_from_slice(&data_header(block));
        self.wire.extend_from_slice(payload);
        self.packets += 1;
    }

    /// Payload bytes in the window (headers not counted).
    pub fn payload_len(&self) -> usize {
        self.wire.len() - 4 * self.packets
    }

    /// Whether windows still go out with GSO (for the transfer's log line).
    pub fn uses_gso(&self) -> bool {
        self.gso
    }

    /// Send the window's packets in order.
    pub fn send(&mut self, socket: &UdpSocket) -> std::io::Result<()> {
        let mut sent = 0;
        if self.gso && self.packets > 1 {
            match self.send_gso(socket, &mut sent) {
                Ok(()) => return Ok(()),
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => return Err(err),
                Err(err) => {
                    // A refused send leaves nothing on the wire: send the rest of this window
                    // packet by packet, and every later window too.
                    tracing::debug!(%err, "UDP GSO refused; sending TFTP packets one by one");
                    self.gso = false;
                }
            }
        }
        for packet in self.wire[sent..].chunks(self.segment) {
            socket.send(packet)?;
        }
        Ok(())
    }

    #[cfg(target_os = "linux")]
    /// Send `wire` in GSO sends of at most [`MAX_SEGMENTS`]; `sent` counts the bytes that left.
    fn send_gso(&self, socket: &UdpSocket, sent: &mut usize) -> std::io::Result<()> {
        use nix::sys::socket::{ControlMessage, MsgFlags, SockaddrStorage, sendmsg};
        use std::io::IoSlice;
        use std::os::fd::AsRawFd;

        let size = u16::try_from(self.segment)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let per_send = (MAX_PAYLOAD / self.segment).clamp(1, MAX_SEGMENTS) * self.segment;
        for part in self.wire.chunks(per_send) {
            let cmsg = [ControlMessage::UdpGsoSegments(&size)];
            let cmsgs: &[ControlMessage] = if part.len() > self.segment {
                &cmsg
            } else {
                &[] // a lone packet is an ordinary datagram
            };
            sendmsg::<SockaddrStorage>(
                socket.as_raw_fd(),
                &[IoSlice::new(part)],
                cmsgs,
                MsgFlags::empty(),
                None,
            )
            .map_err(std::io::Error::from)?;
            *sent += part.len();
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn send_gso(&self, _socket: &UdpSocket, _sent: &mut usize) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Send `blocks` payloads as one window and return the datagrams the peer receives.
    fn received(burst: &mut Burst, blocks: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        burst.clear();
        for (i, b) in blocks.iter().enumerate() {
            burst.push(u16::try_from(i + 1).unwrap(), b);
        }
        assert_eq!(
            burst.payload_len(),
            blocks.iter().map(Vec::len).sum::<usize>()
        );
        burst.send(&tx).unwrap();
        let mut buf = vec![0u8; 70_000];
        (0..blocks.len())
            .map(|_| {
                let n = rx.recv(&mut buf).unwrap();
                buf[..n].to_vec()
            })
            .collect()
    }

    fn check(blksize: usize, windowsize: u16, lens: &[usize]) {
        let blocks: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, n)| vec![(i % 251) as u8; *n])
            .collect();
        for gso in [true, false] {
            let mut burst = Burst::new(blksize, windowsize);
            burst.gso &= gso;
            let got = received(&mut burst, &blocks);
            if gso && windowsize > 1 && cfg!(target_os = "linux") {
                assert!(burst.uses_gso(), "loopback takes GSO sends");
            }
            for (i, (packet, block)) in got.iter().zip(&blocks).enumerate() {
                let number = u16::try_from(i + 1).unwrap();
                assert_eq!(&packet[..4], &data_header(number), "gso {gso}, packet {i}");
                assert_eq!(&packet[4..], &block[..], "gso {gso}, packet {i}");
            }
        }
    }

    #[test]
    fn a_window_arrives_as_one_datagram_per_block() {
        // A full window of full blocks, and one ending in a short block.
        check(1468, 16, &[1468; 16]);
        check(1468, 16, &[1468, 1468, 1468, 100]);
        // A file that is a multiple of blksize ends with an empty block: a bare header.
        check(512, 4, &[512, 512, 0]);
        // More blocks than one GSO send may carry (44 of 1472 bytes, or 64 segments).
        check(1468, 64, &[1468; 64]);
        check(8, 128, &[8; 128]);
        // A lone packet.
        check(1468, 16, &[7]);
    }
}
